"""Explicit "remember …" statements found by rules, with no model: at least 15 requests and 15 non-requests per
language (English, Chinese, Japanese, Korean), and what each request keeps."""

from datetime import UTC, datetime

import pytest

from cairn.consolidation.explicit import explicit_candidate, explicit_statement, kind_of, language_of
from cairn.events import TranscriptAppended

TENANT = "0b5e8f9a-3c1d-4e2f-8a6b-7c9d0e1f2a3b"
SID = "5f0c2d3e-4b5a-4c6d-9e8f-0a1b2c3d4e5f"

REQUESTS: dict[str, list[tuple[str, str]]] = {
    "en": [
        ("Remember that I'm vegetarian.", "I'm vegetarian"),
        ("remember I live in Lisbon", "I live in Lisbon"),
        ("Please remember that my sister is called Ana", "My sister is called Ana"),
        ("Please remember: my passport expires in March", "My passport expires in March"),
        ("Remember, I take my coffee black", "I take my coffee black"),
        ("Don't forget that I'm allergic to peanuts", "I'm allergic to peanuts"),
        ("dont forget my dentist is Dr. Silva", "My dentist is Dr. Silva"),
        ("Do not forget that the standup moved to 10am", "The standup moved to 10am"),
        ("Keep in mind that I hate cilantro", "I hate cilantro"),
        ("Hey, remember that our wifi password changed", "Our wifi password changed"),
        ("OK please remember I prefer aisle seats", "I prefer aisle seats"),
        ("Could you remember that I work nights?", ""),  # a question: see NOT_REQUESTS instead
        ("Make a note that the car is due for service in May", "The car is due for service in May"),
        ("Remember this: the repo lives on GitLab now", "The repo lives on GitLab now"),
        ("Memorize that my badge number is 4471", "My badge number is 4471"),
        ("Never forget that Sam is lactose intolerant", "Sam is lactose intolerant"),
    ],
    "zh": [
        ("记住我不吃辣", "我不吃辣"),
        ("请记住：我住在杭州", "我住在杭州"),
        ("帮我记住，我女儿叫小雨", "我女儿叫小雨"),
        ("记一下，我的航班是周五早上八点", "我的航班是周五早上八点"),
        ("别忘了我对花生过敏", "我对花生过敏"),
        ("不要忘了下周三开会", "下周三开会"),
        ("不要忘记我喜欢靠窗的座位", "我喜欢靠窗的座位"),
        ("请记得我每天早上跑步", "我每天早上跑步"),
        ("你帮我记住这个：车牌号是浙A12345", "车牌号是浙A12345"),
        ("记下：公司搬到了滨江", "公司搬到了滨江"),
        ("牢记我老婆的生日是三月五号", "我老婆的生日是三月五号"),
        ("千万别忘了我不喝酒", "我不喝酒"),
        ("请帮我记一下我的工号是8848", "我的工号是8848"),
        ("记住，项目代号叫凤凰", "项目代号叫凤凰"),
        ("别忘记我儿子在读三年级", "我儿子在读三年级"),
        ("要记得我周末不加班", "我周末不加班"),
    ],
    "ja": [
        ("覚えておいて：私はベジタリアンです", "私はベジタリアンです"),
        ("私はベジタリアンだと覚えておいて", "私はベジタリアンだ"),
        ("妹の名前は花子だって覚えておいてください", "妹の名前は花子だ"),
        ("覚えて、私の誕生日は五月三日", "私の誕生日は五月三日"),
        ("辛い物が苦手なことを覚えておいてね", "辛い物が苦手"),
        ("忘れないで：会議は金曜日に移動した", "会議は金曜日に移動した"),
        ("私は東京に住んでいることを忘れないで", "私は東京に住んでいる"),
        ("覚えといて、パスポートは三月に切れる", "パスポートは三月に切れる"),
        ("猫の名前はミケって覚えて", "猫の名前はミケ"),
        ("コーヒーはブラックが好きと覚えておいて", "コーヒーはブラックが好き"),
        ("メモして：歯医者は火曜日", "歯医者は火曜日"),
        ("ピーナッツアレルギーがあることを覚えておいてください", "ピーナッツアレルギーがある"),
        ("覚えておいてください、会社は渋谷に移転しました", "会社は渋谷に移転しました"),
        ("夫は魚が嫌いだと覚えててね", "夫は魚が嫌いだ"),
        ("息子は小学三年生だということを忘れないでください", "息子は小学三年生だ"),
        ("プロジェクト名はフェニックスだと覚えておいて。", "プロジェクト名はフェニックスだ"),
    ],
    "ko": [
        ("기억해: 나는 채식주의자야", "나는 채식주의자야"),
        ("나는 채식주의자라는 걸 기억해 줘", "나는 채식주의자"),
        ("내 생일이 5월 3일이라는 걸 기억해줘", "내 생일이 5월 3일"),
        ("기억해 줘, 나는 부산에 살아", "나는 부산에 살아"),
        ("여동생 이름은 지수라는 것을 기억해 주세요", "여동생 이름은 지수"),
        ("잊지 마: 회의가 금요일로 옮겨졌어", "회의가 금요일로 옮겨졌어"),
        ("나는 땅콩 알레르기가 있다는 걸 기억해", "나는 땅콩 알레르기가 있"),
        ("커피는 블랙을 좋아한다는 걸 꼭 기억해 둬", "커피는 블랙을 좋아한"),
        ("기억해 둬, 여권은 3월에 만료돼", "여권은 3월에 만료돼"),
        ("우리 회사가 강남으로 이사했다는 사실을 기억해 줘", "우리 회사가 강남으로 이사했"),
        ("기억하세요: 치과 예약은 화요일입니다", "치과 예약은 화요일입니다"),
        ("고양이 이름은 나비라는 거 기억해 줘", "고양이 이름은 나비"),
        ("남편은 생선을 싫어한다는 걸 기억해 놔", "남편은 생선을 싫어한"),
        ("프로젝트 이름은 피닉스야, 기억해 줘", "프로젝트 이름은 피닉스야"),
        ("잊지 말아 줘, 아들은 초등학교 3학년이야", "아들은 초등학교 3학년이야"),
        ("나는 매운 음식을 못 먹어 잊지 마세요", "나는 매운 음식을 못 먹어"),
    ],
}

NOT_REQUESTS: dict[str, list[str]] = {
    "en": [
        "Do you remember what I said yesterday?",
        "I remember the old house on the hill",
        "I can't remember his name",
        "Remember when we went to Paris?",
        "Can you remember my birthday?",
        "Could you remember that I work nights?",
        "What do you remember about me?",
        "I don't remember",
        "She will remember it forever",
        "That was a memorable trip",
        "Remembrance Day is in November",
        "Nobody remembers that song",
        "He forgot the keys again",
        "remember",
        "Remembering names is hard for me",
        "Let's book the flight to Lisbon",
        "I keep forgetting my umbrella",
    ],
    "zh": [
        "你还记得我说过什么吗？",
        "我记不住他的名字",
        "我记得小时候住在乡下",
        "记得我们去年去过北京吗",
        "你记住了吗？",
        "他总是忘记带钥匙",
        "我明天去上海",
        "下周二我去上海参加产品发布会",
        "这个日记本很好看",
        "记者今天来采访了",
        "我忘了带伞",
        "记忆力越来越差了",
        "你能记住这么多吗",
        "他的笔记写得很清楚",
        "别担心，我会处理的",
        "记录一下会议很重要吗？",
    ],
    "ja": [
        "昨日のこと覚えてる？",
        "覚えていますか？",
        "よく覚えています",
        "何も覚えていません",
        "名前が覚えられない",
        "この単語は覚えやすい",
        "子供の頃のことを覚えている",
        "彼は約束を忘れた",
        "明日東京に行きます",
        "覚えてない",
        "私の誕生日を覚えていますか",
        "記憶力が悪くなった",
        "メモ帳を買いました",
        "忘れ物をしました",
        "昨日は雨でした",
        "覚えていたら教えて？",
    ],
    "ko": [
        "기억나?",
        "기억이 안 나",
        "나는 어린 시절을 기억해",
        "어제 일을 기억하니",
        "내 생일 기억해?",
        "그는 약속을 잊었어",
        "내일 서울에 가요",
        "기억력이 나빠졌어",
        "그 노래 기억하세요?",
        "나는 그걸 잘 기억해",
        "우리가 처음 만난 날을 기억해요?",
        "기억할 수 없어",
        "메모장을 샀어요",
        "오늘은 비가 와요",
        "잊어버렸어",
        "그 사람 이름 기억나요?",
    ],
}


def _requests(lang: str) -> list[tuple[str, str]]:
    return [(said, kept) for said, kept in REQUESTS[lang] if kept]


@pytest.mark.parametrize("lang", ["en", "zh", "ja", "ko"])
def test_each_language_has_at_least_15_sentences_each_way(lang: str) -> None:
    assert len(_requests(lang)) >= 15
    assert len(NOT_REQUESTS[lang]) >= 15


@pytest.mark.parametrize(
    ("said", "kept"), [case for lang in REQUESTS for case in _requests(lang)], ids=lambda value: value[:24]
)
def test_a_request_to_remember_keeps_the_fact(said: str, kept: str) -> None:
    statement = explicit_statement(said)
    assert statement is not None, said
    assert statement.fact == kept


@pytest.mark.parametrize("said", [s for lang in NOT_REQUESTS for s in NOT_REQUESTS[lang]], ids=lambda s: s[:24])
def test_a_mention_of_memory_or_a_question_is_not_a_request(said: str) -> None:
    assert explicit_statement(said) is None


def test_the_statement_carries_its_language() -> None:
    assert [language_of(s) for s in ("I'm vegan", "我不吃辣", "私はベジタリアンです", "나는 채식주의자야")] == [
        "en",
        "zh",
        "ja",
        "ko",
    ]


def test_likes_and_dislikes_are_preferences_and_the_rest_profile() -> None:
    assert kind_of("I hate cilantro") == "preference"
    assert kind_of("我不吃辣") == "preference"
    assert kind_of("I live in Lisbon") == "profile"


def _appended(
    text: str, role: str = "user", chat_type: str = "direct", key: str = "agent:main:main"
) -> TranscriptAppended:
    return TranscriptAppended.model_validate(
        {
            "tenant_id": TENANT, "session_key": key, "session_id": SID, "position": 3, "reset_index": 0,
            "message_id": "m-7", "role": role, "text": text, "channel": "telegram", "chat_type": chat_type,
            "token_estimate": 5, "occurred_at": datetime(2026, 12, 6, 9, 30, tzinfo=UTC),
        }
    )  # fmt: skip


def test_a_users_request_in_a_direct_chat_is_an_explicit_candidate_of_importance_one() -> None:
    candidate = explicit_candidate(_appended("记住我不吃辣"))
    assert candidate is not None
    assert (candidate.explicit, candidate.importance, candidate.text, candidate.entity) == (
        True,
        1.0,
        "我不吃辣",
        "user",
    )
    assert candidate.kind == "preference"
    assert candidate.original == "记住我不吃辣"
    assert candidate.provenance.message_ids == ("m-7",)
    assert candidate.provenance.origin == "owner"
    assert candidate.provenance.occurred_at == datetime(2026, 12, 6, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("role", "chat_type", "key"),
    [
        ("assistant", "direct", "agent:main:main"),
        ("user", "group", "agent:main:telegram:group:1"),
        ("user", "direct", "cron:daily"),
    ],
)
def test_the_agent_a_group_member_or_a_cron_job_is_not_the_owner(role: str, chat_type: str, key: str) -> None:
    assert explicit_candidate(_appended("Remember that I'm vegetarian", role, chat_type, key)) is None
