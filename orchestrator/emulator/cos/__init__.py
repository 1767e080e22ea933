"""COS XML API: buckets and objects on disk, streamed, with q-sign signatures."""
