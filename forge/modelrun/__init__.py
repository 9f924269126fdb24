"""The package's old name, kept for one import: op files carved before it was renamed
``forge.model_probe`` import ``forge.modelrun.carved``, and a bank keeps each op's source (the
runtime imports it to resolve a carved op), so ``carved`` answers here too. Nothing else lives here."""
