from lmspec.reference.cli import main

raise SystemExit(main())
