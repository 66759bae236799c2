"""The HTTP surfaces: the API, the web chat's session, the dashboard (its feed and
snapshots), the admin kill switch."""
