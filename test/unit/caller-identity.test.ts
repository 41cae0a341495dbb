import { describe, expect, it } from 'vitest';
import { messageFor, notificationFor } from '../../functions/consumers/notify/effect';
import { pipelineCloudEvent } from '../../shared/events/schemas';
import { callerDisplayName, iamCaller } from '../../shared/http/caller';
import { approvedRow, busEvent, rejectedRow } from '../support/dynamo-consumer-fixtures';

/** A request as API Gateway hands it to the function, with IAM authorization's identity fields. */
const signedBy = (userArn: string | null, user = 'AIDAEXAMPLE') => ({
  headers: {},
  requestContext: {
    identity: { userArn, user, caller: user, accountId: '123456789012' },
  },
});

describe('who the tasks API records as the caller (iamCaller, shared/http/caller.ts)', () => {
  it('records an IAM user, or the root, by its ARN', () => {
    for (const arn of [
      'arn:aws:iam::123456789012:user/alice',
      'arn:aws:iam::123456789012:user/editorial/alice',
      'arn:aws:iam::123456789012:root',
    ])
      expect(iamCaller(signedBy(arn) as never)).toBe(arn);
  });

  it('records a role session as the role’s ARN with the session name marked as the session’s', () => {
    const arn = 'arn:aws:sts::123456789012:assumed-role/content-reviewer/alice';

    expect(iamCaller(signedBy(arn, 'AROAEXAMPLE:alice') as never)).toBe(
      'arn:aws:iam::123456789012:role/content-reviewer (session alice)',
    );
  });

  it('a holder of a shared role who names its session after a user is never recorded as that user', () => {
    const forged = iamCaller(
      signedBy('arn:aws:sts::123456789012:assumed-role/content-reviewer/alice', 'AROAEXAMPLE:alice') as never,
    );
    const user = iamCaller(signedBy('arn:aws:iam::123456789012:user/alice') as never);

    expect(forged).not.toBe(user);
    expect(forged).toMatch(/^arn:aws:iam::123456789012:role\/content-reviewer /);
    expect(callerDisplayName(forged ?? '')).toBe('alice (role content-reviewer)');
    expect(callerDisplayName(user ?? '')).toBe('alice');
  });

  it('refuses a request no IAM principal signed', () => {
    expect(iamCaller(signedBy(null) as never)).toBeUndefined();
  });
});

describe('the notify consumer’s message names the reviewer, never an IAM ARN', () => {
  const reviewer = 'arn:aws:iam::123456789012:role/content-reviewer (session rita)';

  it.each([
    ['approval', approvedRow()],
    ['rejection', rejectedRow()],
  ])('%s', (_kind, row) => {
    const event = pipelineCloudEvent.parse(busEvent(row).detail);
    const withReviewer = { ...event, data: { ...event.data, reviewer } } as typeof event;

    const message = messageFor(notificationFor(withReviewer));

    const text = JSON.stringify(message);
    expect(text).not.toMatch(/arn:aws/);
    expect(message.attributes.reviewer).toBe('rita (role content-reviewer)');
    expect((message.body as { message: string }).message).toContain('by rita (role content-reviewer)');
  });
});
