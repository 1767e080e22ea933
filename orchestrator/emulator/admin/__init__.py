"""The admin API (``/_emulator/...``): the cloud's controls for tests and tools, and what it shows of its insides."""
