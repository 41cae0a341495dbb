import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import type { ConsumerName } from '../../../shared/topology';
import type { BusDeadLetter } from './bus-types';
import { replaceDurably } from './durable-file';

/**
 * The bus's dead letters (`dead-letters.jsonl`), oldest first, this run's and earlier runs':
 * what a rule target's dead-letter queue holds on AWS. A letter is appended when its target gives
 * up, and leaves by a redrive, which the caller journals before it calls {@link remove}, or
 * when its queue's retention is over ({@link expire}).
 */
export class DeadLetterFile {
  private readonly letters: BusDeadLetter[] = [];

  constructor(private readonly path: string) {}

  /** Reads the letters earlier runs left. */
  load(): void {
    if (!existsSync(this.path)) return;
    let torn = false;
    for (const line of readFileSync(this.path, 'utf8').split('\n')) {
      if (!line.trim()) continue;
      try {
        this.letters.push(JSON.parse(line) as BusDeadLetter);
      } catch {
        // A line torn by a crash mid-append: rewrite the file without it below, or the next
        // append would glue a good letter onto the fragment and lose it on the next read.
        torn = true;
      }
    }
    if (torn) this.rewrite();
  }

  get all(): readonly BusDeadLetter[] {
    return this.letters;
  }

  /** The oldest letter with this event id (and consumer, when given). */
  find(id: string, consumer?: ConsumerName): BusDeadLetter | undefined {
    return this.letters.find((d) => d.id === id && (!consumer || d.consumer === consumer));
  }

  /** Appends a letter; throws (keeping nothing) when the file cannot take it. */
  add(letter: BusDeadLetter): void {
    appendFileSync(this.path, `${JSON.stringify(letter)}\n`);
    this.letters.push(letter);
  }

  /** Removes the letters `expired` says are gone (an SQS retention period over); returns them. */
  expire(expired: (letter: BusDeadLetter) => boolean): BusDeadLetter[] {
    const gone = this.letters.filter(expired);
    if (gone.length === 0) return gone;
    for (const letter of gone) this.letters.splice(this.letters.indexOf(letter), 1);
    this.rewrite();
    return gone;
  }

  remove(letter: BusDeadLetter): void {
    const index = this.letters.indexOf(letter);
    if (index < 0) return;
    this.letters.splice(index, 1);
    this.rewrite();
  }

  private rewrite(): void {
    replaceDurably(
      this.path,
      this.letters.map((d) => JSON.stringify(d)),
    );
  }
}
