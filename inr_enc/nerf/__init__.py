"""NeRF building blocks in plain torch (so they run on CPU too): frustum Gaussians (``frustum``), Instant-NGP's
occupancy grid (``occupancy``; every grid's one interface: ``estimator``), volume rendering of packed samples
(``volume_rendering``), and for unbounded scenes mip-NeRF 360's contraction (``contraction``), the encoders' view of
space (``space``) and cone-angle sampling over a contracted occupancy grid (``unbounded``)."""
