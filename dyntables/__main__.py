from dyntables.cli.main import main

raise SystemExit(main())
