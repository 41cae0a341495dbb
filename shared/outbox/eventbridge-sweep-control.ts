import { DisableRuleCommand, EnableRuleCommand, type EventBridgeClient } from '@aws-sdk/client-eventbridge';
import type { SweepControl } from './relay-invocation';

/**
 * The busy sweep on AWS: a scheduled EventBridge rule (on the default bus, as every scheduled
 * rule) that this relay enables while rows stay pending and disables once the outbox is empty.
 *
 * Enabling is always sent: it is rare (a run left work behind) and must not be skipped on a
 * stale belief. A disable is remembered for one busy period, so an idle stream of nudges does
 * not call DisableRule on every run; another relay that enabled the rule meanwhile only costs
 * a few extra sweeps until that memory lapses.
 */
export class EventBridgeSweepControl implements SweepControl {
  private disabledUntil = 0;

  constructor(
    private readonly events: EventBridgeClient,
    private readonly ruleName: string,
    private readonly rememberDisabledMs: number,
    private readonly clock: () => number = Date.now,
  ) {}

  async setBusy(busy: boolean): Promise<boolean> {
    if (busy) {
      this.disabledUntil = 0;
      await this.events.send(new EnableRuleCommand({ Name: this.ruleName }));
      return true;
    }
    if (this.clock() < this.disabledUntil) return false;
    await this.events.send(new DisableRuleCommand({ Name: this.ruleName }));
    this.disabledUntil = this.clock() + this.rememberDisabledMs;
    return true;
  }
}
