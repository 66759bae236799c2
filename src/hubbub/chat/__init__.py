"""``hubbub chat``: a terminal client for people.

:mod:`~hubbub.chat.format` and :mod:`~hubbub.chat.view` turn envelopes into display lines,
:mod:`~hubbub.chat.commands` parses what is typed (all three testable without a terminal),
and :mod:`~hubbub.chat.app` is the prompt_toolkit application around them.
"""
