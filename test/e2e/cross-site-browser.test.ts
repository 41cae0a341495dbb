import { existsSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { deliveryBoundMs, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { waitFor } from '../support/wait-for';

/*
 * What a web page on another origin can do to the local runtime from a real browser (headless
 * Chromium): send a `text/plain` POST without a preflight, submit a form, frame the dashboard,
 * or reach the server under a rebound host name. Each must change nothing.
 */

const chromiumPath = '/usr/bin/chromium';
const haveChromium = existsSync(chromiumPath);
if (!haveChromium) {
  console.warn(`cross-site browser tests skipped: ${chromiumPath} is missing (apt-get install -y chromium)`);
}

function launch(extraArgs: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', ...extraArgs],
  });
}

/** The attacker: a page on another local origin (another port), written for one target. */
function attackerPage(target: string, taskId: string): string {
  // A text/plain form whose one field's name and value join into JSON: the classic way to send a
  // JSON-looking body cross-site without a preflight.
  return `<!doctype html><html><body>
<form id="approve" method="POST" action="${target}/tasks/${taskId}/approve" enctype="text/plain">
  <input name='{"approvedBy":"mallory","x":"' value='"}'>
</form>
<iframe id="frame" src="${target}/"></iframe>
<script>
window.results = {};
(async () => {
  try {
    const r = await fetch('${target}/ops/outbox/dead/redrive', {
      method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{"all":true}',
    });
    window.results.simple = r.type;
  } catch (e) { window.results.simple = 'error'; }
  try {
    await fetch('${target}/ops/outbox/dead/redrive', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"all":true}',
    });
    window.results.preflighted = 'sent';
  } catch (e) { window.results.preflighted = 'blocked'; }
  window.results.done = true;
})();
</script></body></html>`;
}

describe.skipIf(!haveChromium)(
  haveChromium
    ? 'the local runtime against a page on another origin, in headless Chromium'
    : 'the local runtime against a page on another origin (skipped: chromium not installed)',
  () => {
    let runtime: Runtime;
    let dir: string;
    let browser: Browser;
    let attacker: Server;
    let attackerUrl: string;
    let taskId: string;
    let deadEventId: string;
    const post = async (path: string, body: unknown) =>
      (await pipelineClient(runtime.url).call<{ taskId: string; eventId: string }>('POST', path, body)).body;

    beforeAll(async () => {
      dir = tempDataDir('pipeline-cross-site-');
      runtime = await startRuntime({ dataDir: dir, port: 0, sweepMs: 60_000 });
      // A dead outbox event a redrive would put back, and a task an approve would change.
      const delivered = await post('/tasks', { title: 'delivered' });
      deadEventId = (await post(`/tasks/${delivered.taskId}/approve`, {})).eventId;
      await waitFor(
        () =>
          runtime.db.query<{ status: string }>('SELECT status FROM outbox WHERE event_id = :id', {
            id: deadEventId,
          }),
        ({ rows }) => rows[0]?.status === 'delivered',
        { timeoutMs: deliveryBoundMs, what: 'the approval delivered' },
      );
      await runtime.db.query("UPDATE outbox SET status = 'dead', last_error = 'test' WHERE event_id = :id", {
        id: deadEventId,
      });
      taskId = (await post('/tasks', { title: 'pending' })).taskId;

      attacker = createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/html' }).end(attackerPage(runtime.url, taskId));
      });
      await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
      attackerUrl = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
      browser = await launch();
    });

    afterAll(async () => {
      await browser?.close();
      await new Promise((resolve) => attacker?.close(resolve));
      await runtime?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    const outboxStatus = async () =>
      (
        await runtime.db.query<{ status: string }>('SELECT status FROM outbox WHERE event_id = :id', {
          id: deadEventId,
        })
      ).rows[0]?.status;
    const taskStatus = async () =>
      (
        await runtime.db.query<{ status: string }>('SELECT status FROM tasks WHERE task_id = :id', {
          id: taskId,
        })
      ).rows[0]?.status;

    it('cannot redrive with a simple or a preflighted request, nor frame the dashboard', async () => {
      const page = await browser.newPage();
      await page.goto(`${attackerUrl}/`);
      await page.waitForFunction(
        () => (globalThis as unknown as { results: { done?: boolean } }).results.done === true,
      );
      const results = await page.evaluate(
        () => (globalThis as unknown as { results: Record<string, string> }).results,
      );

      // The simple request went out (the browser cannot stop it) and the server refused it; the
      // JSON one never left the browser: its preflight got no CORS answer.
      expect(results.simple).toBe('opaque');
      expect(results.preflighted).toBe('blocked');
      expect(await outboxStatus()).toBe('dead');

      // frame-ancestors 'none': the frame holds Chromium's error page, not the dashboard.
      const frame = page.frames().find((f) => f !== page.mainFrame());
      expect(frame).toBeDefined();
      expect(await frame?.locator('[data-testid="alarm-summary"]').count()).toBe(0);
      expect(frame?.url()).not.toBe(`${runtime.url}/`);
      await page.close();
    });

    it('cannot approve with a cross-site form', async () => {
      const page = await browser.newPage();
      await page.goto(`${attackerUrl}/`);
      const [response] = await Promise.all([
        page.waitForNavigation(),
        page.locator('#approve').evaluate((form) => (form as unknown as { submit(): void }).submit()),
      ]);
      expect(response?.status()).toBe(403);
      expect(await taskStatus()).toBe('pending_review');
      await page.close();
    });

    it('refuses the page and the API under a rebound host name (421)', async () => {
      const port = new URL(runtime.url).port;
      const rebound = await launch([`--host-resolver-rules=MAP rebind.test 127.0.0.1`]);
      try {
        const page = await rebound.newPage();
        const response = await page.goto(`http://rebind.test:${port}/`);
        expect(response?.status()).toBe(421);
        const api = await page.evaluate(async () => (await fetch('/ops/status')).status);
        expect(api).toBe(421);
        const approve = await page.evaluate(async (id) => {
          const r = await fetch(`/tasks/${id}/approve`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ approvedBy: 'mallory' }),
          });
          return r.status;
        }, taskId);
        expect(approve).toBe(421);
        expect(await taskStatus()).toBe('pending_review');
      } finally {
        await rebound.close();
      }
    });
  },
);
