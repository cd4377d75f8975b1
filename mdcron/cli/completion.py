"""`completion bash|zsh` (issue 25): a script completing commands, options and task ids.

Ids come from a fast listing of the tasks folder by the shell itself (the first `id:` line of
each `*.md`, as grep finds it): no Python starts on a Tab. The home is the `--home` on the line
being completed, else $MDCRON_HOME, else the home this script was printed for."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

# commands whose first argument is a task id
ID_COMMANDS = ("run", "why", "show", "logs", "enable", "disable", "comment", "comments",
               "revert-heal", "next")


def commands_and_options(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """command -> its options, read from the parser itself (so new options complete too)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: sorted(o for a in p._actions for o in a.option_strings
                         if a.help != argparse.SUPPRESS)
            for name, p in sub.choices.items()}


def _ids_function(home: Path, zsh: bool = False) -> str:
    default = shlex.quote(str(home))
    # zsh stops a command at a pattern that matches nothing (no sub-folders): nullglob, and
    # stdin closed so that grep with no file left reads nothing
    nullglob = "\n    setopt localoptions nullglob" if zsh else ""
    return f"""_mdcron_ids() {{{nullglob}
    local home="${{MDCRON_HOME:-}}" i
    for ((i = 1; i < ${{#words[@]}}; i++)); do
        [[ ${{words[i]}} == --home ]] && home="${{words[i+1]}}"
        [[ ${{words[i]}} == --home=* ]] && home="${{words[i]#--home=}}"
    done
    [[ -z $home ]] && home={default}
    command grep -h -m1 -E '^id:' "$home"/tasks/*.md "$home"/tasks/*/*.md </dev/null 2>/dev/null \\
        | sed -E 's/^id:[[:space:]]*//; s/[[:space:]]+#.*$//; s/^["'"'"']//' \\
        | sed -E 's/["'"'"'][[:space:]]*$//'
}}
"""


def bash_script(parser: argparse.ArgumentParser, home: Path) -> str:
    table = commands_and_options(parser)
    cases = "\n".join(f"        {name}) opts={shlex.quote(' '.join(opts))} ;;"
                      for name, opts in sorted(table.items()))
    ids = "|".join(ID_COMMANDS)
    return f"""# mdcron completion for bash: eval "$(python3 scheduler.py completion bash)"
{_ids_function(home)}
_mdcron() {{
    COMPREPLY=()
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" cmd="" opts i
    local -a words=("${{COMP_WORDS[@]}}")
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            --home) ((i++)) ;;
            -*|*.py) ;;
            *) cmd="${{COMP_WORDS[i]}}"; break ;;
        esac
    done
    if [[ $prev == --home ]]; then COMPREPLY=($(compgen -d -- "$cur")); return; fi
    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W {shlex.quote(' '.join(sorted(table)))} -- "$cur")); return
    fi
    case "$cmd" in
{cases}
    esac
    if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$opts" -- "$cur")); return; fi
    case "$cmd" in
        {ids}) COMPREPLY=($(compgen -W "$(_mdcron_ids)" -- "$cur")) ;;
        history) [[ $prev == --task ]] && COMPREPLY=($(compgen -W "$(_mdcron_ids)" -- "$cur")) ;;
        validate) COMPREPLY=($(compgen -f -- "$cur")) ;;
    esac
}}
complete -F _mdcron scheduler.py ./scheduler.py mdcron
"""


def zsh_script(parser: argparse.ArgumentParser, home: Path) -> str:
    table = commands_and_options(parser)
    cases = "\n".join(f"        {name}) opts=({' '.join(shlex.quote(o) for o in opts)}) ;;"
                      for name, opts in sorted(table.items()))
    ids = "|".join(ID_COMMANDS)
    return f"""#compdef scheduler.py mdcron
# mdcron completion for zsh: eval "$(python3 scheduler.py completion zsh)"
{_ids_function(home, zsh=True)}
_mdcron() {{
    local cmd="" i
    local -a opts
    for ((i = 2; i < CURRENT; i++)); do
        case "${{words[i]}}" in
            --home) ((i++)) ;;
            -*|*.py) ;;
            *) cmd="${{words[i]}}"; break ;;
        esac
    done
    if [[ ${{words[CURRENT-1]}} == --home ]]; then _files -/; return; fi
    if [[ -z $cmd ]]; then compadd -- {' '.join(sorted(table))}; return; fi
    case "$cmd" in
{cases}
    esac
    if [[ $PREFIX == -* ]]; then compadd -- $opts; return; fi
    case "$cmd" in
        {ids}) compadd -- ${{(f)"$(_mdcron_ids)"}} ;;
        history) [[ ${{words[CURRENT-1]}} == --task ]] && compadd -- ${{(f)"$(_mdcron_ids)"}} ;;
        validate) _files ;;
    esac
}}
compdef _mdcron scheduler.py mdcron
"""
