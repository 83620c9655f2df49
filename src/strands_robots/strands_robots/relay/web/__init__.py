"""The relay's web status page: a team signs in with its token and watches its jobs live; a station sees its queue.

- ``view_model``: what a page shows of a job (pure: state, progress, episodes, sheets, flags, ids not kept);
- ``sessions``: server-side sessions, CSRF tokens and the sign-in rate limit (pure);
- ``source``: the jobs a principal may see, read from the relay's store by the relay's own visibility rules;
- ``app``: the aiohttp routes, templates (Jinja2, autoescaped) and server-sent events;
- ``server``: the app on its own thread and event loop, started by the relay's ``--web HOST:PORT``.
"""
