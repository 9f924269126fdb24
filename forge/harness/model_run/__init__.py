"""A model-level run: profile, choose, carve out, optimize, prove (``run.optimize_model``; the
package's names are on ``forge.harness``)."""
