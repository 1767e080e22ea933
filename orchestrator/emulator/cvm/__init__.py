"""CVM 2017-03-12: instances, images, prices, zones and the instance-type catalog."""
