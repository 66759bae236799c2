"""The wire: envelope model, kinds, ids, markers, capability matcher, dialect codecs."""
