"""The machine both sides run on: its facts and device (``facts``), its measured bandwidth and
matmul peak (``figures``, read by ``readings``), and the memory a verification may hold
(``memory``)."""
