"""The ``dyntables`` command line: ``sql``, ``shell``, ``version`` and ``demo``.

Everything here is a thin layer over :class:`dyntables.Lakehouse`; the CLI owns only
argument parsing, configuration discovery, text rendering and the error contract
(one line on stderr, exit 1).
"""
