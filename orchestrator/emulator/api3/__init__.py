"""The API 3.0 JSON protocol shared by CVM, VPC, STS and billing: TC3 signatures, parameters, envelopes."""
