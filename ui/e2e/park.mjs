// Park, resume, drain: an operator finds the parked partition from the
// overview, reads its poison message's error (markup shown as text),
// resumes it (Go fixed the handler first) and watches it drain.
import { scenario, param, assert, definition, watch, submit, base } from './lib.mjs';

const queue = param('QUEUE');
const partition = param('PARTITION');
const error = param('ERROR');
const count = Number(param('COUNT'));

await scenario('park', async ({ open }) => {
  const page = await open('alice');
  await page.goto(base);
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();

  // The overview's failing-partitions table of the queue lists it, with the error.
  const failing = page.locator('section').filter({ has: page.getByRole('heading', { name: `Failing partitions of ${queue}` }) });
  const row = failing.getByRole('row').filter({ has: page.getByRole('link', { name: partition, exact: true }) });
  await row.getByText('parked', { exact: true }).waitFor();
  await row.getByText(error).waitFor();

  await row.getByRole('link', { name: partition, exact: true }).click();
  await page.getByRole('heading', { level: 1, name: `${queue} / partition ${partition}` }).waitFor();
  const url = page.url();
  await definition(page, 'State').getByText('parked', { exact: true }).waitFor();
  await definition(page, 'Last error').getByText(error).waitFor();
  assert((await page.locator('main b').count()) === 0, 'the error text was rendered as markup');
  const backlog = await definition(page, 'Backlog').textContent();
  const m = /(\d+) incoming, (\d+) unprocessed/.exec(backlog);
  assert(m && Number(m[1]) + Number(m[2]) === count, `backlog ${JSON.stringify(backlog)}, want ${count} messages`);

  const resp = await submit(page, page.getByRole('button', { name: 'Resume', exact: true }));
  assert(resp.status() < 400, `Resume: ${resp.status()}`);
  await page.getByRole('main').getByRole('status').filter({ hasText: 'resumed' }).waitFor();

  // Watch it drain, from the partition's own URL (not the POST's).
  await page.goto(url);
  await watch(page, definition(page, 'Backlog'), /^0 incoming, 0 unprocessed/, 'the backlog');
  await definition(page, 'State').getByText('ok', { exact: true }).waitFor();
});
