"""The instance metadata service (http://metadata.tencentyun.com/latest/...)."""
