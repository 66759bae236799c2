"""The gateway: connections, routing, auth, coordination wiring, HTTP API, dashboard."""
