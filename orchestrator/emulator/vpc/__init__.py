"""VPC 2017-03-12: the default VPC, subnets and security group of each region."""
