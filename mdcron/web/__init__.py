"""Mission Control: the web dashboard (`scheduler.py web`). Starlette, uvicorn and Jinja2 are
imported only here: a tick never loads this package (tests/test_imports.py)."""
