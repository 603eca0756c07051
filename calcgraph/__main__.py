from calcgraph.cli import main

raise SystemExit(main())
