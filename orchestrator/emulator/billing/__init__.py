"""Billing 2018-07-09: the account balance, falling as instances run."""
