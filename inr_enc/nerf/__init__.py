"""NeRF building blocks in plain torch (so they run on CPU too): frustum Gaussians (``frustum``), Instant-NGP's
occupancy grid (``occupancy``) and volume rendering of packed samples (``volume_rendering``)."""
