"""The two patterns every reader of a configured URL needs: `${VAR}` references and the scheme.

Kept apart from heartbeat.py so that the idle tick, which pings through heartbeat.py, does not
pay for `re` (~4 ms) on a plain URL; config, notify_config and doctor import them from here.
"""

from __future__ import annotations

import re

ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
