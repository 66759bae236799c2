"""Admission: who may connect and send what — tokens, bans, channel access, grants, capabilities."""
