"""The browser page: server-rendered, works without JavaScript, live with it.

`adapters.web.mount.setup_web(app, core, settings)` mounts it on the service's aiohttp
application. URLs chat messages link to are built by `adapters.web.links`, which the MCP server
and the CLI import too: this package's own import stays empty, so they do not load the page
and the store with it.
"""
