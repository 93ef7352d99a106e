// The seeded generator and mutator the tests share with the fuzzer (scripts/fuzz/rng.ts).
export { Rng, mutate } from '../../scripts/fuzz/rng.js';
