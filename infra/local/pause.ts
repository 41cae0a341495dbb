/**
 * A wait between a loop's rounds that stopping ends at once. On the global `setTimeout`, not
 * `node:timers/promises` with an abort signal, so that a test's fake clock (vitest's) moves it.
 */
export class Pause {
  private wait: { timer: NodeJS.Timeout; resolve: () => void } | undefined;

  /** Resolves after `ms`, or at once when {@link wake} is called meanwhile. */
  for(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wait = undefined;
        resolve();
      }, ms);
      this.wait = { timer, resolve };
    });
  }

  /** Ends the pause under way, if any. */
  wake(): void {
    if (!this.wait) return;
    clearTimeout(this.wait.timer);
    this.wait.resolve();
    this.wait = undefined;
  }
}
