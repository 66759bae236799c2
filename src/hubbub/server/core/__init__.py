"""The message pipeline after admission: sequencing, delivery, sessions, requests, and
the coordination engines' hooks."""
