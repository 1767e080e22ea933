"""STS 2018-08-13: temporary credentials whose session policy the emulator enforces."""
