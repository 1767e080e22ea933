"""Money: what jobs cost, whether the account can pay, and the reserved pool the team prepays."""
