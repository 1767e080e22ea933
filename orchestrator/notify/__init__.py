"""Notifications: what a job's events become (events.py), in each receiver's shape (formats.py), and the sender that
posts the store's outbox (deliver.py). docs/notifications.md is the user's page."""
