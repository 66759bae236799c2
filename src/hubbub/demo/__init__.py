"""The demo: a gateway, four agents and a calculator playing a scripted scene (``hubbub demo``).

:mod:`.scene` runs the gateway and plays the scene, :mod:`.cast` makes the agents and the
calculator, :mod:`.shot` takes the optional screenshots. The ``hubbub demo`` command
(:mod:`hubbub.cli.demo`) starts it; nothing here imports the command line.
"""
