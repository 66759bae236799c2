"""The state the pipeline shares: spaces, channels, sessions, connections, message ids,
proposals, counters and the activity feed."""
