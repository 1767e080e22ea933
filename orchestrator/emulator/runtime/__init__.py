"""What makes the emulator a cloud rather than a set of handlers: instances as processes, the spot market,
fault injection, rate limits and the admin API."""
