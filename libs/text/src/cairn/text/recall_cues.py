"""Cue tables for recall intent, one per language: the words that mark a question, a reference to the past,
a recall request, or the user's own plans.

Every pattern runs on text already normalised by `recall_intent` (NFKC, case-folded, Traditional Chinese folded
to Simplified for Chinese), so full-width forms, capitals and 們/说-style variants need no entries here. A table is
data: the rule that combines the cues lives in `recall_intent`, the same for every language.
"""

import re
from dataclasses import dataclass, fields

_END = r"\s*[.!~。！～…]*\s*(?=$|[,;\n，、；])"
"""Where a clause ends, for sentence-final particles (chat often drops the question mark)."""

_KO_PAST_SYLLABLES = "".join(chr(c) for c in range(0xAC00, 0xD7A4) if (c - 0xAC00) % 28 == 20)
"""Hangul syllables ending in ㅆ: the past-tense marker fused into the verb (갔, 했, 였, 봤, 줬 …)."""
_KO_PAST = f"[{_KO_PAST_SYLLABLES}]"


@dataclass(frozen=True)
class CueTable:
    """One language's cues. Each field is one kind of cue; the rule in `recall_intent` says how kinds combine."""

    question: re.Pattern[str]  # question form: mark, interrogative, sentence-final particle, inverted auxiliary
    ask: re.Pattern[str]  # "tell me / 告诉我 / 教えて / 알려줘": a request for information, as good as a question
    remind: re.Pattern[str]  # "I forgot / 提醒我": a question only together with a reference to the past
    recall: re.Pattern[str]  # an explicit recall request, enough on its own ("do you remember", "还记得")
    recollect: re.Pattern[str]  # "again / 来着 / だっけ / 였지": asking to be reminded
    past: re.Pattern[str]  # a reference to an earlier conversation ("we decided", "上次说的", "前に話した")
    past_time: re.Pattern[str]  # a past time ("last week", "昨天"): counts only about the user (`self_`)
    self_: re.Pattern[str]  # the user or their family ("I", "我", "私", "내")
    self_past: re.Pattern[str]  # the user as the subject of a past-tense verb ("did I", "我去过", "내가 갔")
    plan: re.Pattern[str]  # the user's plans and commitments ("my flight", "安排", "予定", "일정")
    when: re.Pattern[str]  # asking for a time ("when", "几点", "何曜", "몇 시"): about the user, a plan
    fact: re.Pattern[str]  # things the user may have told (flight, name …): count about the user or a coming day
    future_time: re.Pattern[str]  # a future time ("tomorrow", "下周", "来週", "다음 주")
    scheduled: re.Pattern[str]  # a scheduled doing ("am I going", "去", "行く", "만나"): with a future time, a plan
    advice: re.Pattern[str]  # how-to, advice, weather, a request to do something new: not about what was told


def _table(**patterns: str) -> CueTable:
    names = {field.name for field in fields(CueTable)}
    assert patterns.keys() == names, names ^ patterns.keys()
    return CueTable(**{name: re.compile(pattern) for name, pattern in patterns.items()})


_EN_WH = r"(?:what|wat|wut|whats|when|whn|whens|where|wheres|who|whos|whose|whom|which|why|how|hows)(?:'s|'re|'d|'ll)?"
_EN_CLAUSE = (
    r"(?:^|[,.!;:\n]\s*|\b(?:and|but|so|also|btw|oh|hey|hi|ok|okay|um+|uh+|wait|sorry|anyway|then|hmm+|lol|yo|"
    r"ugh|argh|omg|ah+|eh|er|yeah|dude|man|welp|alright|now|quick question|actually|remind me)\s+)"
)
_EN_SUBJECT = r"(?:i|you|u|we|they|he|she|it|my|our|your|ur)"
_EN_PLAN_NOUN = (
    r"(?:plans?|schedule|agenda|calendar|itinerary|flights?|train|bus|ferry|appointments?|appt|meetings?|call|"
    r"reservations?|booking|trip|travel|vacation|holiday|deadlines?|dentist|doctor|interview|exams?|test|class|"
    r"lessons?|birthday|anniversary|wedding|party|dinner|lunch|date|events?|reminders?|to-?dos?|tasks?|gate|seat|"
    r"hotel|check-?in|pickup|delivery|shift|visit|launch|demo|presentation|review|standup|sync|conference|budget|"
    r"goals?|commitments?|day off|errands?|order)"
)
_EN_FACT_NOUN = r"(?:name|address|password|pin|number|room|locker|size|allerg(?:y|ies)|dose|medication|blood type)"
_EN_DAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"

ENGLISH = _table(
    question=(
        rf"\?|{_EN_CLAUSE}(?:{_EN_WH}\b(?!\s+an?\b)|(?:do|does|did|don't|dont|didn't|didnt|doesn't)\s+{_EN_SUBJECT}\b"
        rf"|(?:is|isn't|are|aren't|r|was|wasn't|were|weren't|have|haven't|has|had|can|could|will|would|am|shall)\s+"
        rf"(?:{_EN_SUBJECT}|the|this|that|there|anything|any|a|an)\b)|\b(?:right|correct){_END}"
    ),
    ask=(
        r"\b(?:tell|show|give|read)\s+me\b(?!\s+(?:to|a|an|tomorrow|tonight|later|in|at|on|every|when|how)\b)"
        r"|\blet me know\b|(?:^|[,.!;]\s*)(?:list|show|check|pull up|find|look up|read)\b"
        r"|\bi(?:'d| would)? (?:like|want|need) to know\b|\bi(?:'m| am)? (?:wondering|trying to remember)\b"
        r"|\bi wonder\b|\bany ?idea\b|\bdo (?:you|u) know\b"
    ),
    remind=r"\b(?:i|we)\s+(?:forgot|forget|can't remember|cant remember|don't remember|dont remember)\b",
    recall=(
        r"\bremind me\b[,:]?\s*(?:again\s*)?(?:what|wat|when|where|who|which|how|whether|if|of|again|the name)\b"
        r"|\bremind me(?:\s+again)?\s*[?.!]*\s*$"
        r"|\b(?:do|did|can|could|would)\s+(?:you|u)\s+(?:still\s+|even\s+)?(?:remember|recall|recollect)\b(?!\s+to\b)"
        r"|\b(?:you|u)\s+remember\s+(?:what|when|where|who|which|how|that|the)\b"
        r"|\b(?:i|we)\s+(?:(?:totally|completely|already|just)\s+)?(?:forgot|forget|forgotten|have forgotten|"
        r"can't remember|cant remember|cannot remember|don't remember|dont remember|can't recall|cant recall|"
        r"don't recall|lost track of)\s+(?:again\s+)?(?:what|when|where|who|which|how|whether|if|the name|the date|"
        r"the time|the title|the address|the number)\b"
        r"|\b(?:refresh|jog) my memory\b|\b(?:tell|say) (?:me|it|that) again\b"
    ),
    recollect=(
        r"\b(?:what|wat|whats|when|whens|where|wheres|who|whos|which|how|hows)\b[^.!?\n]{0,80}?\bagain\b"
        r"|\bwhat (?:was|were)\b[^.!?\n]{0,60}?\b(?:that|those|it called|its name)\b"
    ),
    past=(
        r"\b(?:i|we|u|you)(?:'ve|'d| have| had)?\s+(?:\w+\s+)?(?:said|told|mentioned|talked|spoke|discussed|decided|"
        r"agreed|chose|picked|settled|promised|recommended|suggested|shared|asked|noted|brought up|went over|"
        r"came up with|figured out|concluded|landed on|went with|were talking|were saying|were discussing)\b"
        r"|\bdid\s+(?:you|u)\s+(?:ever\s+|already\s+|just\s+)?(?:say|tell|mention|talk|speak|discuss|decide|agree|"
        r"choose|pick|settle|promise|recommend|suggest|share|ask|note|book|reserve|write|send|give|set|schedule)\b"
        r"|\b(?:last time|our (?:last|previous) (?:chat|conversation|talk)|the other day|a while back)\b"
    ),
    past_time=(
        r"\b(?:last\s+(?:week|month|year|night|weekend|summer|winter|spring|fall|autumn|session|"
        rf"{_EN_DAY})|yesterday|previously|earlier(?:\s+(?:today|this|you|we|i|on))?|back then|"
        r"(?:a|\w+|a few|a couple of) (?:days?|weeks?|months?|years?) ago|recently)\b"
    ),
    self_=(
        r"\b(?:i|me|my|mine|we|us|our|ours|myself|im|ive|mom|mum|dad|wife|husband|kids?|son|daughter|boyfriend|"
        r"girlfriend|bf|gf|partner)\b"
    ),
    self_past=(
        r"\bdid\s+(?:i|we)\b|\b(?:have|had)\s+(?:i|we)\s+(?:ever\s+|already\s+)?(?!got\b)\w+(?:ed|en|ne|t|d)\b"
        r"|\b(?:was|were)\s+(?:i|we)\b|\b(?:was|were)\s+(?:my|our)\b|\b(?:my|our)\s+(?:\w+\s+){0,2}(?:was|were)\b"
        r"|\b(?:i|we)\s+(?:\w+\s+)?(?:went|had|bought|ate|met|saw|got|took|made|paid|left|put|spent|sent|gave|came|"
        r"found|lost|flew|drove|wore|wrote|heard|thought|did|tried|visited|booked|ordered|watched|stayed|parked|"
        r"moved|started|finished|named|called|signed|registered|borrowed|lent|owed|planned|picked|chose)\b"
        r"|\b(?:i|we)\s+(?!\w*eed\b)\w{2,}ed\b|\b(?:what|where|when|who|how|which)'?d\s+(?:i|we)\b"
        # done to the user: "the bank that called me"
        r"|\b(?:told|gave|sent|showed|(?!\w*eed\b)\w{2,}ed)\s+(?:me|us)\b"
        r"|\b(?:told|gave|sent|showed|(?!\w*eed\b)\w{2,}ed)\b[^.!?\n]{0,30}?\bto (?:me|us)\b"
        r"|\bdid\s+(?:[\w']+\s+){1,3}?(?:tell|say|give|send|show|ask|recommend|suggest|prescribe)\s+(?:me|us)\b"
    ),
    plan=(
        rf"\b(?:my|our|ur|me and \w+'s)\s+(?:[\w'-]+\s+){{0,3}}?{_EN_PLAN_NOUN}\b"
        r"|\bthe (?:plan|schedule|agenda|itinerary|deadline)\b|\b(?:do|have)\s+(?:i|we)\s+(?:have|got)\b"
        r"|\b(?:am i|are we|r we|i'm|im|we're)\s+(?:still\s+)?(?:free|busy|available|booked|off|supposed)\b"
        r"|\b(?:am i|are we|r we)\s+(?:still\s+)?\w+ing\b|\bwhat'?s on\b|\bwhat (?:do|have) (?:i|we) (?:got|have)\b"
    ),
    when=(
        r"\b(?:when|whn|whens|what time|what day|which day|what date|how long until"
        r"|how many days (?:until|till|left))\b"
    ),
    fact=rf"\b(?:my|our)\s+(?:[\w'-]+\s+){{0,2}}?{_EN_FACT_NOUN}\b|\bthe\s+(?:[\w'-]+\s+){{0,2}}?{_EN_PLAN_NOUN}\b",
    future_time=(
        r"\b(?:tomorrow|tmrw|tmr|tonight|today|later|soon|upcoming|next\s+\w+|this\s+(?:morning|afternoon|evening|"
        rf"week|weekend|month|year|{_EN_DAY})|(?:on\s+)?{_EN_DAY}|the weekend|in the morning)\b"
    ),
    scheduled=(
        r"\b(?:am i|are we|do i|do we|will i|will we|i'm|we're|i am|we are|i have|we have|i've got|have i got|"
        r"i need to|we need to|i gotta|i'm supposed|am i supposed|are we supposed)\b"
    ),
    advice=(
        r"\bhow (?:do|can|could|should|would|to|might)\b|\bshould\b|\bwhy\b|\bhelp me\b|\bwould (?:you|u)\b"
        r"|\bwhat(?:'s| is| are)? (?:a |some |the )?(?:good|best|nice|great|cheap|fun)\b"
        r"|\b(?:ideas?(?!\s+(?:when|what|where|who|which|if|whether)\b)|tips?|advice|suggestions?|recommend|recommendations?)\b"
        r"|\b(?:can|could) (?:you|u)\s+(?:please\s+)?(?!tell|remind|check|look|find|show|list|give|pull|read)\w+"
        r"|\b(?:weather|forecast|rain|snow|umbrella|temperature|traffic)\b"
    ),
)

_ZH_CHAT_VERB = r"(?:说|讲|提|聊|谈|问|告诉|推荐|建议|分享|定|约|商量|讨论|决定|选)"
_ZH_INTERROGATIVE = r"(?:什么|啥|哪|几|多少|谁)"
_ZH_SELF = r"(?:我|咱|俺)"
_ZH_DAY = r"(?:周|星期|礼拜)[一二三四五六日天]"

CHINESE = _table(
    question=(
        rf"\?|吗|(?:么|嘛|呢|没|不|没有|吧\s*\?){_END}|(?<!没)什么(?!都|也)|啥(?!都|也)|哪(?!怕|儿都|里都|都)"
        r"|谁(?!都|也)|多少|多久|多长时间|怎么|怎样|如何|为什么|为何|几(?:点|号|月|岁|楼|层|时)|(?:星期|周|礼拜)几"
        r"|是不是|有没有|对不对|对吧|是吧|好不好|行不行|要不要|能不能|会不会|记不记得|来着|请问"
        r"|是[^，。？?!！]{1,12}还是"  # an alternative question: "选的是红色还是绿色"
    ),
    ask=(
        r"告诉我|跟我说|和我说|给我说|说一下|讲一下|说说|讲讲|查一下|查查|列一下|列出|给我看"
        r"|帮我(?:查|看|找|回忆|想|翻|确认)|确认一下|再说一遍|再讲一遍|重复一下|我想知道|想问一下|问一下"
    ),
    remind=r"提醒(?:我|一下)|(?<!别)(?<!不要)(?:忘了|忘记了|忘掉了)",
    recall=(
        r"还记得|记不记得|记得.{0,40}?(?:吗|么|不|没|\?)|你记得"
        r"|(?:想不起来?|记不清楚?|记不太清|不记得)(?=[^。.!！]{2,})|回忆一下|帮我回忆|帮我想想"
    ),
    recollect=rf"来着|又是{_ZH_INTERROGATIVE}",
    past=(
        rf"{_ZH_CHAT_VERB}过|(?:上次|上回|之前|刚才|刚刚|那天|那次|前几天|早些时候|前面|先前)[^，。？?!！]{{0,12}}?"
        rf"(?:{_ZH_CHAT_VERB}|看|去|买|吃|订)|(?:我|我们|咱们|你)[^，。？?]{{0,6}}?(?:{_ZH_CHAT_VERB}|提到|谈到)的"
        r"(?!对|没错|不对|有道理)|(?:说|约|定|商量)好|聊到|提到过|(?:上次|上回|那天|之前|刚才)那|跟你说过|和你说过"
        rf"|{_ZH_CHAT_VERB}给?(?:你|我|我们)的"  # "我今天问你的", "推荐给我的"
    ),
    past_time=r"昨天|前天|昨晚|上周|上个?星期|上个?礼拜|上个?月|去年|前年|以前|之前|当时|那时候?|上次|上回|那次|前阵子|前段时间",
    self_=rf"{_ZH_SELF}|老婆|老公|媳妇|女朋友|男朋友|爸|妈|儿子|女儿|孩子",
    self_past=(
        rf"{_ZH_SELF}[^，。？?]{{0,8}}?(?<![不超经通难路])过(?![年来去得几日节生])"
        rf"|{_ZH_SELF}[^，。？?]{{0,8}}?了{_ZH_INTERROGATIVE}|{_ZH_SELF}[^，。？?]{{0,4}}?是(?:什么时候|哪|在哪)[^，。？?]{{0,8}}?的"
        r"|(?:昨天|前天|昨晚|上周|上个?星期|上个?礼拜|上个?月|去年|前年|上次|上回|那次|那天)[^，。？?]{0,8}?"
        r"(?:去|吃|买|见|看|住|喝|玩|用|订)(?:过|了|的)"  # the subject dropped: "上周去的那家店"
        rf"|{_ZH_SELF}[^，。？?]{{0,12}}?(?:喝|吃|买|去|看|住|见|用|订|点|聊|说|提|玩|借|送|拍|听|读|做)的那"
    ),
    plan=r"安排|计划|日程|行程|待办|约会|有约|约了|deadline|ddl|schedule",
    when=r"什么时候|几点|几号|哪天|哪一天|(?:星期|周|礼拜)几|几月",
    fact=(
        r"航班|班机|机票|火车|高铁|动车|车票|预约|预订|预定|会议|开会|有会|面试|考试|截止|生日|纪念日|任务|聚会|饭局|签证"
        r"|酒店|出差|旅行|旅游|婚礼|复诊|看牙|体检|登机|值班|上课|名字|地址|电话|号码|密码|房间号|座位|车位|过敏|血型"
        r"|尺码|账号|meeting|flight|appointment"
    ),
    future_time=(
        rf"明天|后天|大后天|下周|下个?星期|下个?礼拜|下个?月|明年|今晚|今天|今儿|周末|这周|本周|月底|年底|过几天"
        rf"|待会|一会儿?|下次|回头|上午|下午|中午|晚上|早上|明早|明晚|{_ZH_DAY}"
    ),
    scheduled=r"去|出发|见|飞|走|到|回|约|开会|上班|上课|集合|碰头|碰面|干嘛|干什么|做什么|有事|有空|忙",
    advice=(
        r"应该|应当|该怎么|该不该|要不要|建议我|推荐(?:一下|一些|几个|个)|有什么好|哪个好|哪家好|好吃|比较好|怎么"
        r"(?:办|做|弄|写|改|用|选|安排|准备|去|走|订|买)|如何|能不能|可以.{0,6}吗|帮我(?:订|定|预订|预约|安排|设|加|写|发|"
        r"买|取消|改|创建|做|规划|添加)|给我(?:订|安排|规划|加)|天气|下雨|气温|攻略|注意什么|需要注意|穿什么"
    ),
)

_JA_SELF = r"(?:私|わたし|あたし|僕|ぼく|俺|おれ|うち|自分|我々)"

JAPANESE = _table(
    question=(
        rf"\?|(?:か|かな|かしら|の|っけ|よね|でしょう?|だろう?){_END}"
        r"|何(?!か|も|とか|度も|でも)|なに(?!か|も)|なん(?:で|て|の|だ|時|日|曜|番|人)|いつ(?!も|か|でも)"
        r"|どこ(?!か|も|でも)|どちら|どっち|だれ(?!か|も)|誰(?!か|も|でも)|どれ(?!も|か)|どの|どう(?!も|か|ぞ)|どんな|いくら|いくつ"
    ),
    ask=r"教えて|おしえて|知りたい|確認して|見せて|もう一度(?:言って|教えて)|もう一回|リストアップ|一覧",
    remind=r"リマインド|思い出させ|忘れ(?:ちゃった|てしまった|た|ました)",
    recall=r"(?:覚えて|おぼえて)(?:る|い(?!て)|ます|ない)|思い出(?:せ|して|させて)|記憶にある",
    recollect=(
        r"っけ|だったかな|たかな|だったよね|でしたよね"
        r"|(?:何|なん|いつ|どこ|誰|だれ|どれ|どの|いくら)[^。？?、]{0,6}?(?:だった|でした)"
    ),
    past=(
        r"(?:(?<!の)前に|この前|このあいだ|この間|先日|前回|さっき|以前|こないだ|あの時|あのとき)[^。？?]{0,15}?"
        r"(?:話|言|教|相談|決|聞|伝|紹介|すすめ|勧め|薦め|約束|メモ|書|行|会|見|買|食|予約)"
        r"|話した|話してた|話していた|話し合った|言った|言ってた|言っていた|教えてくれた|教えてもらった|相談した|決めた"
        r"|決まった|約束した|伝えた|紹介してくれた|すすめてくれた|勧めてくれた|おすすめしてくれた|聞いた|メモした"
        r"|ことにした|ことになった|話に出た|って言って|(?:前|この前|前回|さっき)の(?:話|件)"
    ),
    past_time=r"昨日|きのう|おととい|一昨日|先週|先月|去年|昨年|昨夜|ゆうべ|昔|この前|こないだ|先日",
    self_=rf"{_JA_SELF}|私たち|僕ら|僕たち|俺たち|うちら|一緒に|妻|夫|嫁|旦那|母|父|息子|娘|彼女|彼氏",
    self_past=(
        rf"{_JA_SELF}[^。？?]{{0,15}}?(?:った|いた|した|んだ|てた|だった|きた|みた)(?!ら|り|い)"
        r"|(?:昨日|きのう|おととい|先週|先月|去年|昨年|昨夜|ゆうべ)[^。？?]{0,10}?"
        r"(?:行った|会った|買った|食べた|見た|泊まった|飲んだ|読んだ|訪れた|行ってきた)"  # the subject dropped
    ),
    plan=r"予定|スケジュール|プラン|約束|予約|用事|アポ|待ち合わせ|やること|タスク|schedule|deadline",
    when=r"いつ(?!も|か|でも)|何時|何日|何曜|何月",
    fact=(
        r"計画|フライト|飛行機|航空便|便名|新幹線|会議|ミーティング|打ち合わせ|面接|試験|テスト|締め?切り?|〆切|期限"
        r"|誕生日|記念日|旅行|出張|集合|飲み会|歯医者|診察|通院|シフト|結婚式|パーティー|デート|ホテル|名前|住所"
        r"|電話番号|番号|パスワード|部屋番号|座席|アレルギー|サイズ|暗証番号|meeting|flight"
    ),
    future_time=r"明日|あした|あす|明後日|あさって|来週|来月|来年|今週末?|週末|今夜|今晩|今日|きょう|次回|今度|[月火水木金土日]曜",
    scheduled=r"行く|行きます|出発|会う|会います|出る|着く|帰る|集合|発つ|出かけ|何する|何をする|何やる|あるの|ある\?|ありますか",
    advice=(
        r"どうすれば|どうしたら|どうやって|方法|(?:やり|行き|乗り|作り|使い|書き|選び)方|おすすめ(?!してくれた)|オススメ"
        r"|べき|(?:いい|良い)(?:か|です|の|かな)|ほうがいい|方がいい|天気|雨|気温"
        r"|(?:して|て)(?:ください|くれる|くれない|もらえる|もらえない|ほしい|おいて)|お願い|入れて|追加|設定|登録|作って"
    ),
)

_KO_SELF = r"(?<![가-힣])(?:나|내|제|저|우리|저희)(?:는|도|가|의|랑|하고|한테|에게|를|을)?(?![가-힣])"

KOREAN = _table(
    question=(
        rf"\?|(?:니|냐|나요|까요?|죠|지요|래요?|는지|던가|더라|{_KO_PAST}지|잖아){_END}"
        r"|뭐(?!든|라도)|뭘|뭔지|무엇|무슨|언제(?!든|나)|어디(?!든|선가|론가)|누구(?!든|나)|누가|어떻게(?!든)"
        r"|왜(?!냐)|몇(?!몇)|얼마(?!\s?전)|어느(?!\s?날)|어떤|어땠|어때"
    ),
    ask=(
        r"알려\s?(?:줘|주세요|줄래|줄 수|주라|주실|주시겠|줘요)|말해\s?(?:줘|주세요|봐)|다시\s?말해"
        r"|확인해\s?(?:줘|주세요)|보여\s?(?:줘|주세요)|궁금(?:해|한데|하다)|알고\s?싶"
    ),
    remind=r"상기시켜|리마인드|까먹|잊어\s?버렸|잊었",
    recall=(
        r"기억(?:나|해(?!\s*(?:둬|놔|줘|두|주))|하니|하냐|하세요|하시|하지|하고\s?있|할\s?수|이?\s?안\s?나|이\s?나)"
        r"|생각이?\s?안\s?나|생각(?:나|이 나)(?:니|냐|요|\?)"
    ),
    recollect=rf"{_KO_PAST}(?:지|더라|던가)|더라|던가",
    past=(
        r"지난\s?번|저번|아까|예전에|얼마\s?전|그때|그 때|(?:^|[.!?,]\s*)전에"
        r"|전에\s*(?:말|얘기|이야기|알려|추천|했|정|약속|물어)"
        rf"|(?:말|얘기|이야기|추천|결정|약속|상의|논의|대화|언급|정|알려\s?주|물어\s?보|말해\s?주)(?:{_KO_PAST}|한|하던|던|(?:해\s?)?(?:준|줬))"
        r"|기로\s?(?:했|한)|말씀하신|말씀드린|[라다]고\s?(?:했|하던|한|말했)"  # quoted: "뭐라고 했는지"
    ),
    past_time=r"어제|그제|그저께|지난\s?주|지난\s?달|작년|지난\s?해|어젯밤|옛날|예전",
    self_=rf"{_KO_SELF}|내가|제가|엄마|아빠|아내|남편|와이프|여자\s?친구|남자\s?친구|여친|남친|아들|딸(?!기)",
    self_past=(
        rf"(?:{_KO_SELF}|내가|제가)[^.?!]{{0,15}}?{_KO_PAST}"
        r"|(?:어제|그제|지난\s?주|지난\s?달|작년|지난\s?해|어젯밤)[^.?!]{0,12}?"
        r"(?:갔|먹었|샀|봤|만났|묵었|마셨|읽었|다녀왔|했던)"  # the subject dropped
    ),
    plan=r"일정|계획|약속|예약|스케줄|할\s?일|투두|schedule|deadline",
    when=r"언제(?!든|나)|몇\s?시(?!간)|며칠|무슨\s?요일|몇\s?월",
    fact=(
        r"비행기|항공편|비행편|항공권|기차|ktx|회의|미팅|면접|시험|마감|여행|출장|생일|기념일|모임|회식|진료|치과"
        r"|데드라인|발표|행사|결혼식|수업|호텔|이름|주소|전화\s?번호|번호|비밀\s?번호|비번|호수|좌석|알레르기|사이즈"
        r"|meeting|flight"
    ),
    future_time=r"내일|모레|다음\s?주|다음\s?달|내년|이번\s?주말?|주말|오늘\s?밤|오늘|이따가?|나중에|[월화수목금토일]요일",
    scheduled=r"가(?:야|는|나|니|요|기로|\?|$)|갈|출발|만나|만날|떠나|떠날|도착|모이|모일|뭐\s?해|뭐\s?하|뭐\s?있|있어\?|있나|있니",
    advice=(
        r"어떻게\s?(?:해야|하면|하지|할까)|방법|추천\s?(?:해\s?줘|해\s?주|좀|할)|뭐가\s?좋|뭘\s?입|날씨|비\s?와|비가"
        r"|좋을까|할까|(?:예약|추가|설정|등록|취소|변경|작성)\s?해\s?(?:줘|주|줄)"
        r"|(?:잡아|넣어|만들어)\s?(?:줘|주)"
    ),
)

TABLES: dict[str, CueTable] = {"en": ENGLISH, "zh": CHINESE, "ja": JAPANESE, "ko": KOREAN}
