/** See dynalite-iterators.mjs. */
export function closeIteratorsOnReturn(): number;
