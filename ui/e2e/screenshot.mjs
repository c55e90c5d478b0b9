// The README's screenshots, taken by ui/screenshot_test.go's TestScreenshots
// once its scene is set: full-page PNGs at 1280 px wide of the overview (light
// and dark), a queue's partition grid a parked partition and the pending dead letters, written to
// E2E_OUT. Any problem a page shows (a script error, a CSP violation, an
// error response) fails it, as in the browser tests.
import { join } from 'node:path';
import { scenario, param, base } from './lib.mjs';

const out = param('OUT');
const queue = param('QUEUE');
const partition = param('PARTITION');

await scenario('screenshot', async ({ open }) => {
  const page = await open('screenshots');
  // A short viewport: a full-page screenshot is then as tall as the page's content.
  await page.setViewportSize({ width: 1280, height: 240 });
  const shoot = async (name) => {
    await page.screenshot({ path: join(out, name), fullPage: true });
    console.log(`  ${name}`);
  };

  await page.emulateMedia({ colorScheme: 'light' });
  await page.goto(base);
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  await page.locator('svg.spark').first().waitFor();
  await shoot('overview.png');
  await page.emulateMedia({ colorScheme: 'dark' });
  await shoot('overview-dark.png');

  await page.emulateMedia({ colorScheme: 'light' });
  await page.goto(`${base}queues/${queue}`);
  await page.getByRole('heading', { level: 1, name: `Queue ${queue}` }).waitFor();
  await shoot('queue.png');

  await page.goto(`${base}queues/${queue}/partitions/${partition}`);
  await page.getByRole('heading', { level: 1, name: `${queue} / partition ${partition}` }).waitFor();
  await page.getByRole('heading', { level: 2, name: 'Behind the head' }).waitFor();
  await shoot('partition.png');

  await page.goto(`${base}deadletters?status=pending`);
  await page.getByRole('heading', { level: 1, name: 'Dead letters' }).waitFor();
  await shoot('deadletters.png');
});
