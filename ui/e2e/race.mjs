// Two tabs racing: alice and bob open the same parked partition and both
// see Resume; alice's resumes it, bob's is refused (409) with what
// changed, and bob is offered Resume no more.
import { scenario, param, assert, definition, watch, submit, base } from './lib.mjs';

const queue = param('QUEUE');
const partition = param('PARTITION');

await scenario('race', async ({ open }) => {
  const alice = await open('alice');
  const bob = await open('bob', { allow: [409] });

  // alice goes through the queue's grid, filtered to parked partitions.
  await alice.goto(base);
  await alice.getByRole('link', { name: queue, exact: true }).first().click();
  await alice.getByRole('navigation', { name: 'State filter' }).getByRole('link', { name: /^parked 1$/ }).click();
  await alice.getByRole('link', { name: partition, exact: true }).click();
  await alice.getByRole('heading', { level: 1, name: `${queue} / partition ${partition}` }).waitFor();
  const url = alice.url();
  await bob.goto(url);

  const resumeA = alice.getByRole('button', { name: 'Resume', exact: true });
  const resumeB = bob.getByRole('button', { name: 'Resume', exact: true });
  await resumeA.waitFor();
  await resumeB.waitFor();

  let resp = await submit(alice, resumeA);
  assert(resp.status() === 200, `alice's Resume: ${resp.status()}`);
  await alice.getByRole('main').getByRole('status').filter({ hasText: 'resumed' }).waitFor();

  resp = await submit(bob, resumeB);
  assert(resp.status() === 409, `bob's Resume: ${resp.status()}, want 409`);
  const outcome = bob.getByRole('main').getByRole('status');
  await outcome.filter({ hasText: 'not done: partition changed since it was shown (shown: parked' }).waitFor();
  await definition(bob, 'State').waitFor();
  assert((await definition(bob, 'State').textContent()).trim() !== 'parked', 'bob is shown the state now');
  assert((await resumeB.count()) === 0, 'bob is still offered Resume');

  await alice.goto(url);
  await watch(alice, definition(alice, 'Backlog'), /^0 incoming, 0 unprocessed/, 'the backlog');
});
