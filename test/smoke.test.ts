import t from 'tap'
import { build, registerAndLogin } from './helpers/build.js'

t.test('register, login, read own record', async (t) => {
  const app = await build(t)
  const me = await registerAndLogin(app)
  const res = await app.inject({ method: 'GET', url: `/api/user/${me.id}`, headers: me.auth })
  t.equal(res.statusCode, 200)
  t.equal(res.json().username, me.username)
})
