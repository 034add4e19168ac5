"""``make bench``: the benchmark suite (start-up cost for now)."""

from bench.startup import main

raise SystemExit(main())
