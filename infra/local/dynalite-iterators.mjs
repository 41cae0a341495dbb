// @ts-check
// Plain JavaScript: imported by dynalite-worker.mjs, which a worker thread loads with Node's own
// loader, and by the test that holds it (test/integration/dynalite-iterators.test.ts).
import { createRequire } from 'node:module';

/**
 * Makes the LevelDB iterators dynalite opens close when it ends their streams.
 *
 * dynalite reads every Query and Scan through a stream whose `destroy` closes the LevelDB
 * iterator by calling `iterator.return()` (dynalite/db/index.js, `createValueStream`), a method
 * the iterators of abstract-level 3 (under the `level` dynalite depends on) do not have: each
 * request left its iterator open, and with it a snapshot of the database, for as long as the
 * engine ran. A snapshot held keeps every delete after it as a tombstone through compactions
 * (https://github.com/google/leveldb/blob/main/doc/impl.md), so the inbox's operator index, an
 * entry written when an attempt begins and deleted when it completes, grew a tail of tombstones
 * that each later Query stepped over: the local `GET /ops/status` read its inbox figures in 89 ms
 * on a new runtime and 705 ms after 20,000 approvals (`npm run bench:growth`). `return` is given
 * to the iterators as the close it means; idempotent.
 * @returns {number} how many iterator classes were given it (0 once done).
 */
export function closeIteratorsOnReturn() {
  const fromDynalite = createRequire(createRequire(import.meta.url).resolve('dynalite'));
  const fromLevel = createRequire(fromDynalite.resolve('level'));
  const abstractLevel = createRequire(fromLevel.resolve('classic-level'))('abstract-level');
  let patched = 0;
  for (const Iterator of [
    abstractLevel.AbstractIterator,
    abstractLevel.AbstractKeyIterator,
    abstractLevel.AbstractValueIterator,
  ]) {
    if (typeof Iterator.prototype.return === 'function') continue;
    Iterator.prototype.return = function () {
      return this.close();
    };
    patched++;
  }
  return patched;
}
