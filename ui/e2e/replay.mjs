// Dead letters replayed in bulk by filter: an operator filters the dead
// letters by error text, replays everything the filter matches (the exact
// count shown first, then confirmed), and sees them resolved (delivered)
// on the overview; Go checks they were delivered in their original order.
import { scenario, param, assert, watch, submit, base } from './lib.mjs';

const queue = param('QUEUE');
const error = param('ERROR');
const count = Number(param('COUNT'));

// field is the filter form's field for name, by its label or its name.
function field(page, name) {
  return page.getByLabel(new RegExp(`^${name}`, 'i')).or(page.locator(`form [name="${name}"]`)).first();
}

async function set(page, name, value) {
  const el = field(page, name);
  if ((await el.evaluate((e) => e.tagName)) === 'SELECT') await el.selectOption(value);
  else await el.fill(value);
}

await scenario('replay', async ({ open }) => {
  const page = await open('carol');
  await page.goto(`${base}deadletters`);
  await set(page, 'queue', queue);
  await set(page, 'error', error);
  await page.getByRole('button', { name: 'Filter', exact: true }).click();

  // The letters, their error shown as text, and the exact count offered.
  await page.getByRole('table').getByText(error).first().waitFor();
  assert((await page.locator('main b').count()) === 0, 'the error text was rendered as markup');
  await page.getByRole('button', { name: `Replay all ${count} matching`, exact: true }).click();
  const confirm = page.getByRole('button', { name: `Confirm replay of ${count} letters`, exact: true });
  const resp = await submit(page, confirm);
  assert(resp.status() < 400, `Confirm replay: ${resp.status()}`);

  // Delivered: the overview counts them resolved (a replayed letter is
  // resolved once its copy is acked).
  await page.goto(base);
  const row = page.getByRole('row').filter({ has: page.getByRole('link', { name: queue, exact: true }) });
  await watch(page, row, new RegExp(`resolved ${count}\\b`), `${queue}'s dead letters`);
});
