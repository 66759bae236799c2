"""Cluster mode: many gateway processes sharing their spaces through Redis (docs/cluster.md).

One node at a time holds the *leadership lease* and runs the router, the engines and the
store; every node (the leader too) accepts clients, forwards their frames to the leader over a
node link and fans the leader's frames out to its own connections.
"""
