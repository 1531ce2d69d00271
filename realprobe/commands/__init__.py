"""CLI command groups, one module per room; `realprobe.cli` registers them."""

#: set by `cli.run`, the `realprobe` program: the process is the command's alone, so a one-shot
#: command may set it up as a whole (`common.one_shot`; a `main()` called inside another
#: program never does). Kept here, which every command loads anyway, not in `common`.
OWN_PROCESS = False
