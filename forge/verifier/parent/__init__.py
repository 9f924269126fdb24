"""The verifier's trusted side: what runs in forge's own process. ``service`` (many candidates of
one op), ``verification`` (one candidate: both workers driven, step by step), ``steps`` (each
step's typed record, and the verdict built from them once, at the end), the checks
that turn a worker's untrusted observations into named checks (``checks``, ``compare``,
``case_stream``, ``case_verdicts``, ``gradient_checks``, ``bound_check``), the round's rivals
(``rivals``), the reference workers kept between verifications (``reference_pool``), and the
parent's side of timing (``timing``). Nothing here imports candidate code."""
