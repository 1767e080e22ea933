"""What the controller ships for an attempt: the workdir archive and agent wheel, the UserData bootstrap, the
RunInstances request and the agents' configurations."""
