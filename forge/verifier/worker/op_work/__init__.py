"""The work an op cannot avoid, for its roofline and its slack: the bytes and FLOPs it must move
and do (``roofline``), the matmul work it must compute (``needed_matmul``), the second pass its
math forces (``passes``), and the input elements behind each output element
(``reduction_lengths``)."""
